mod it;
